"""The fault suite's categories (run by tools/scripts/fault-suite.py)."""
