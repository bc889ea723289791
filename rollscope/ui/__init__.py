"""Streamlit glue for the app's pages: cached store access, URL view state, safe rendering.

Everything Streamlit-aware that more than one page needs lives here, so that page scripts
stay thin. ``trace_store`` knows nothing of this package.
"""
