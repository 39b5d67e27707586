"""The shared core: one implementation per concept, used by every operator.

Nothing here imports an operator package, and only ``runtime`` imports kopf.
"""
