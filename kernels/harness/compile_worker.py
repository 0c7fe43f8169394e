"""A compile worker's `__main__`: what a spawned worker runs in place of the program that started the pool.

`multiprocessing`'s spawn start re-runs the parent's `__main__` in every child (as `__mp_main__`) so that
functions defined there can be unpickled: a user's script without an `if __name__ == "__main__":` guard would
then call its model again in each worker and start a pool of its own, and the worker dies
(`BrokenProcessPool`). A compile pool's workers start from this module instead (kernels/harness/compile_pool.py
`WorkerContext`), as PyTorch Inductor's compile workers start from `python -m torch._inductor.compile_worker`:
nothing here runs on import, and everything a worker calls (its warmup, its start) is pickled by reference to
a module it imports itself.
"""
