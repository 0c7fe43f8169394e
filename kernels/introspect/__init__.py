"""Reading any Triton kernel's configs without running them: lowered here, compiled in workers, counted from the IR."""
