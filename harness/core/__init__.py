"""The shared core, below everything: errors in one line, atomic writes, the sysfs reader, process identity,
leftover sweeping, progress bars, scenarios, the ideal queue. Imports nothing else of the package."""
