"""Choosing: search strategies, live tuning with its cache, and the command line."""
