"""Placeholder while the core module lands."""

import streamlit as st

from app_pages import common

common.page_header("benchmarks", "Not available in this build yet.")
common.sidebar_summary()
st.info("Not available in this build.")
