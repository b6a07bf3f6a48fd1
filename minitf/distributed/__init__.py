"""What TF calls distributed_runtime: cluster specs (servers come with the cluster issue)."""
