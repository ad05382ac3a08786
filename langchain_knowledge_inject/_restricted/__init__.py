"""Restricted mode: raw chunks become a checked safe summary, or a refusal.

The one decision (``scope``), the summary's data, block, refusal and budget
(``safe_summary``), the one fail-closed entry point and the secondary model's call
(``summary``: ``safe_summary_block``; ``summarizer``) and the leak guard (``guard`` and
its ``guard_*`` helpers). It uses the turn's text tools and is used by the surfaces.
"""
