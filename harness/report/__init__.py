"""What a person reads: the summary table at the end of a run and `appliance report`'s HTML page."""
