"""The lessons: one module per workload, holding its analysis; figures.py draws their key figures."""
