"""Training the routing head: sep-CMA-ES over the head's weights, fitness = solved rate."""
