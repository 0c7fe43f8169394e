"""What a config will cost: the roofline + occupancy model, its breakdown, and the fitted residual."""
