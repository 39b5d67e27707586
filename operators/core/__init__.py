"""The shared core: one implementation per concept, used by every operator.

Nothing here imports an operator package, and only ``runtime`` imports kopf.
"""

PROJECT_GROUP = "dra-operators.io"
"""The API group of the project's own kinds (its CRDs), which kopf runs."""
