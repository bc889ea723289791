"""The floor of a first render: a bare Streamlit page that draws four one-line Plotly charts.

bench/dashboards.py opens it in a new browser profile, on its own server, in the same run as
the Rollscope screens: no page of this stack draws four charts in a new profile faster.
"""

import plotly.graph_objects as go
import streamlit as st

st.title("Four charts")
steps = list(range(1, 201))
for chart in range(4):
    figure = go.Figure(go.Scatter(x=steps, y=[(step * 7 + chart) % 13 for step in steps]))
    st.plotly_chart(figure, width="stretch", key=f"chart-{chart}")
