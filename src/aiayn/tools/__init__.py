"""Tools that measure: benchmarks, time to accuracy, the model variations of Table 3."""
