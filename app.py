"""gpuplan's Streamlit app: only the router (`streamlit run app.py`).

The pages live in pages/, one thin file each, with their shared state and widgets in
pages/common.py. `client.showSidebarNavigation = false` (.streamlit/config.toml) keeps
Streamlit's older folder-based navigation (every file in pages/, helpers included) out of the
sidebar before the first session has run this router; the navigation drawn is this one.
"""

import streamlit as st

st.set_page_config(page_title="gpuplan", page_icon=":material/grid_view:", layout="wide")

st.navigation(
    [
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
).run()
