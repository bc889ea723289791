"""SQL: read-only queries over a sandboxed snapshot of the store; the query is in the URL."""

from rollscope.ui import sql_panel

sql_panel.render_page()
