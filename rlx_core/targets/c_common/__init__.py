"""Shared renderer base for C-like targets (C/OpenMP, CUDA, HIP, Metal, OpenCL): see renderer.py."""
