// (being written by the memory-families helper)
