"""Measured ceilings: what this machine really reaches (DRAM, L2, FP32/FP64, tensor cores), the roofs a
roofline is drawn against. No Textual here; cupy and torch are imported inside the functions that use them."""
