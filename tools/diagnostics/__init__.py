"""Diagnostics that explain a dev figure (what a model can and cannot represent); not dev figures themselves."""
