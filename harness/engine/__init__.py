"""Running a grid: the suite and its cells, one cell's life, the executors that run cells under their
limits, and what the driver shows while they run."""
