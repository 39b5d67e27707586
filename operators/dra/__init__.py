"""The DRA domain layer: what several operators know about DRA objects and their values, written
once. It sits between the infrastructure core (``operators.core``) and the operators, and imports
no kopf (issue #24 moves the shared projections, pools and taints here, one at a time)."""
