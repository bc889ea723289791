"""What ``rollscope serve`` runs: the Streamlit app (app.py) behind the chart preload.

``streamlit run`` on this file finds ``app`` (an ``st.App``) and serves it. The module has a
name of its own because Streamlit imports it as a top-level module, not as part of the
``rollscope`` package.
"""

from __future__ import annotations

import streamlit as st
from starlette.middleware import Middleware

from rollscope import app_script
from rollscope.chart_preload import ChartPreloadMiddleware

app = st.App(str(app_script()), middleware=[Middleware(ChartPreloadMiddleware)])
