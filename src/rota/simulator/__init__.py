"""Trace-driven simulation on rota's scheduler core: trace readers (``alibaba``), the packing
engine and its metrics (``pack``), summaries and plots (``report``)."""
