"""`trinity bench`: the coordinator's costs, measured as ratios in one run."""
