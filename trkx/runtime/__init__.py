"""Where and how a process computes: the device (device), the precision of the dense layers
(precision), threads (threads), the memory allocator (allocator) and worker processes
(parallel)."""
