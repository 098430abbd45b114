"""numba kernels, installed as ``tpcore.kernels``. Each kernel module imports numba itself, so
importing this package stays light;
every kernel has a plain NumPy reference it is tested against."""
