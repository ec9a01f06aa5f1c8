"""gpuplan's Streamlit app: only the router (`streamlit run app.py`).

The pages live in pages/, one thin file each, with their shared state and widgets in
pages/common.py. Streamlit treats a `pages/` folder beside the entry script as its older
folder-based navigation until a session has called `st.navigation` (a server-wide switch), so
the first request of a freshly started server runs in that mode. Two things keep that invisible:

- `client.showSidebarNavigation = false` (.streamlit/config.toml) hides Streamlit's own page
  list in both modes, and this router draws the sidebar itself with `st.page_link`, the
  documented way to build a custom menu: the sidebar lists exactly the pages below.
- Each page's URL is its file name, so a first request for /plan_compare resolves in both
  modes; if the older mode runs a page file directly, `common.page_header` hands the run to
  this router (`common.run_router`), which draws the frame and runs the page.
"""

import streamlit as st

from pages import common

st.set_page_config(page_title="gpuplan", page_icon=":material/grid_view:", layout="wide")

PAGES = [
    st.Page("pages/workload.py", title="Workload", icon=":material/list_alt:", default=True),
    st.Page("pages/plan_compare.py", title="Plan & compare", icon=":material/compare:"),
    st.Page("pages/demand_forecast.py", title="Demand forecast", icon=":material/trending_up:"),
    st.Page("pages/horizon_risk.py", title="Horizon & risk", icon=":material/timeline:"),
    st.Page("pages/capacity.py", title="Capacity", icon=":material/stacked_line_chart:"),
    st.Page("pages/benchmarks.py", title="Benchmarks", icon=":material/speed:"),
    st.Page("pages/saved.py", title="Saved & compare", icon=":material/bookmarks:"),
]

current = st.navigation(PAGES, position="hidden")
with st.sidebar:
    for page in PAGES:
        st.page_link(page)
    st.divider()
common.run_routed(current)
