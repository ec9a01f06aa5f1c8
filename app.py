"""gpuplan's Streamlit app: only the router (`streamlit run app.py`).

The pages live in pages/, one thin file each, with their shared state and widgets in
pages/common.py. A folder named pages/ beside the entry script makes Streamlit start in its older
folder-based mode, which lists every file of the folder (helpers included) until a session has
run this router. So `client.showSidebarNavigation = false` (.streamlit/config.toml) hides
Streamlit's own menu in both modes, and the router draws the menu itself: `st.navigation` with
`position="hidden"` for the routing, one `st.page_link` per page in the sidebar, the same list
on every request, including the very first.
"""

import streamlit as st

st.set_page_config(page_title="gpuplan", page_icon=":material/grid_view:", layout="wide")

PAGES = [
    st.Page("pages/workload.py", title="Workload", icon=":material/list_alt:", default=True),
    st.Page(
        "pages/plan_compare.py",
        title="Plan & compare",
        icon=":material/compare:",
        url_path="plan",
    ),
    st.Page(
        "pages/demand_forecast.py",
        title="Demand forecast",
        icon=":material/trending_up:",
        url_path="forecast",
    ),
    st.Page(
        "pages/horizon_risk.py",
        title="Horizon & risk",
        icon=":material/timeline:",
        url_path="horizon",
    ),
    st.Page(
        "pages/capacity.py",
        title="Capacity",
        icon=":material/stacked_line_chart:",
        url_path="capacity",
    ),
    st.Page(
        "pages/benchmarks.py",
        title="Benchmarks",
        icon=":material/speed:",
        url_path="benchmarks",
    ),
    st.Page(
        "pages/saved.py",
        title="Saved & compare",
        icon=":material/bookmarks:",
        url_path="saved",
    ),
]

current = st.navigation(PAGES, position="hidden")
with st.sidebar:
    for page in PAGES:
        st.page_link(page, label=page.title, icon=page.icon)
    st.divider()
current.run()
