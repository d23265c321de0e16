"""The JIT runtime: modules, functions, dispatch and autograd glue (``module.py``); what the
builder sees of a module (``module_base.py``, which warming workers use without torch) and its
miss path (``miss_path.py``); per device kind, how kernels are built (``backend.py``,
``cuda_backend.py``, ``vulkan_backend.py``) and how they are run (``launch.py``,
``vulkan_binding.py``); the devices a call runs on (``devices.py``) and the CUDA driver
(``cuda_api.py``); and ``slangspec.Cache``, the cache store joined to the code generator
(``cache.py``)."""
