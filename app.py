"""gpuplan's Streamlit app: only the router (`streamlit run app.py`).

The pages live in app_pages/, not pages/: while a folder named pages/ sits next to this script,
Streamlit serves its older directory-based navigation (every file in pages/ as a page, helpers
included, this router skipped) until some session happens to run this script first.
"""

import streamlit as st

st.set_page_config(page_title="gpuplan", page_icon=":material/grid_view:", layout="wide")

st.navigation(
    [
        st.Page(
            "app_pages/workload.py", title="Workload", icon=":material/list_alt:", default=True
        ),
        st.Page(
            "app_pages/plan_compare.py",
            title="Plan & compare",
            icon=":material/compare:",
            url_path="plan",
        ),
        st.Page(
            "app_pages/demand_forecast.py",
            title="Demand forecast",
            icon=":material/trending_up:",
            url_path="forecast",
        ),
        st.Page(
            "app_pages/horizon_risk.py",
            title="Horizon & risk",
            icon=":material/timeline:",
            url_path="horizon",
        ),
        st.Page(
            "app_pages/benchmarks.py",
            title="Benchmarks",
            icon=":material/speed:",
            url_path="benchmarks",
        ),
    ]
).run()
