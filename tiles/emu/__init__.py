"""CPU execution of generated CUDA (sm_80), HIP and MSL: lanes as fibers, waves as real collectives (see runner.py)."""
from .atoms import atoms_header
from .runner import CompileError, LaunchError, Module, Param, compile

__all__ = ["CompileError", "LaunchError", "Module", "Param", "atoms_header", "compile"]
