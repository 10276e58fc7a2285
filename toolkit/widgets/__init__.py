"""Thin ipywidgets/plotly views over the kit's plain data objects, one module per view.

Each view keeps its state in a plain object (tests check it without a browser). Figures are plain
``plotly.graph_objects.Figure`` objects shown through ``toolkit.widgets.plot.FigureView``: plotly's mime renderer
(plotly.js loaded once per page) inside an ``ipywidgets.Output`` that is redrawn when a control's
``observe(..., names="value")`` fires. Not ``FigureWidget``: plotly 7 ships it as an anywidget carrying the ~5 MB
plotly.js bundle per figure, which anywidget must load within 2 s, so figures went blank on a busy machine.
"""
