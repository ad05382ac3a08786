"""Restricted mode: raw chunks become a checked safe summary, or a refusal.

Whether a turn is restricted (``scope``: the flags stored behind any source), the one
boundary everything leaving the restricted zone goes through (``boundary``), what each
thread was already shown (``ledger``), the secondary model's call (``summarizer``) and
the leak guard (``guard`` and its ``guard_text`` / ``guard_numbers`` helpers). It uses
the turn's text tools and is used by the surfaces' pipeline.
"""
