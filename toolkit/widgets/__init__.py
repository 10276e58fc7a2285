"""Thin ipywidgets/plotly views over the kit's plain data objects, one module per view.

Each view keeps its state in a plain object (tests check it without a browser) and renders through
``plotly.graph_objects.FigureWidget`` built with its data and layout in the constructor (a FigureWidget shown in
Voila loses changes made before display), updating traces in place on ``observe(..., names="value")``.
"""
