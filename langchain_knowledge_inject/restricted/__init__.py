"""Restricted mode: raw chunks become a checked safe summary, or a refusal.

The one decision (``scope``), the safe summary (``summary``, ``summarizer``) and the leak
guard (``guard`` and its ``guard_*`` helpers).
"""
