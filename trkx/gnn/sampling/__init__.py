"""Minibatch GNN training by bulk ShaDow subgraph sampling as sparse products."""
