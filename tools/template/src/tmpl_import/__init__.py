"""tmpl-dist: one method of paperstack.

Replace this docstring with the paper's method in two sentences. The public API is re-exported
here; the README shows it in one example.
"""

from tmpl_import.estimators import TmplNameError, median_of_means, sample_mean

__version__ = "0.1.0"

__all__ = ["TmplNameError", "__version__", "median_of_means", "sample_mean"]
