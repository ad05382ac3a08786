"""Ingest: files and folders to documents (text, Markdown, HTML, PDF), and the sample data."""
