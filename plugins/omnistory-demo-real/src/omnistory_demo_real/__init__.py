"""``suite=demo_real``: the offline demo with real small pretrained models.

Light: importing it imports neither torch nor any model library.
"""
