# Finding Python, calling it, and turning its errors and warnings into R conditions.

.dp <- new.env(parent = emptyenv())

#' @importFrom reticulate import import_from_path py_module_available py_last_error
NULL

.onLoad <- function(libname, pkgname) {
  # delay_load: Python is found and dpstats imported on first use, not when the
  # package loads, so that library(dpstats) works (and R CMD check passes)
  # without Python
  .dp$module <- reticulate::import("dpstats", delay_load = TRUE)
  .dp$glue_path <- system.file("python", package = pkgname)
  invisible(NULL)
}

dp_condition <- function(message, class, call = NULL, ...) {
  structure(class = c(class, "condition"), list(message = message, call = call, ...))
}

dp_python_missing_message <- function() {
  python <- tryCatch(reticulate::py_config()$python, error = function(e) NULL)
  where <- if (is.null(python)) "no Python was found" else paste0("the Python in use is ", python)
  paste0(
    "The Python package 'dpstats' is not available to reticulate (", where, ").\n",
    "Either point reticulate at a Python that has dpstats, before the first call in this R session:\n",
    "  Sys.setenv(RETICULATE_PYTHON = \"/path/to/python\")   # or put RETICULATE_PYTHON=... in ~/.Renviron\n",
    "or install dpstats into that Python:\n",
    "  pip install dpstats                  # from PyPI\n",
    "  pip install -e /path/to/dpstats      # from a clone of the repository\n",
    "  reticulate::py_install(\"dpstats\", pip = TRUE)"
  )
}

#' The dpstats Python module
#'
#' Returns the Python module \code{dpstats} (imported through reticulate),
#' after checking once per session that Python and dpstats are available.
#'
#' @return A reticulate module object.
#' @section Errors:
#' When Python or the Python package is missing, an error of class
#' \code{dpstats_python_missing} (and \code{dpstats_error}) says how to set
#' \code{RETICULATE_PYTHON} or install dpstats.
#' @examples
#' \dontrun{
#' dp <- dp_python()
#' dp$`__version__`
#' }
#' @export
dp_python <- function() {
  if (!isTRUE(.dp$ready)) {
    ok <- tryCatch(reticulate::py_module_available("dpstats"), error = function(e) FALSE)
    if (!isTRUE(ok)) {
      stop(dp_condition(dp_python_missing_message(), c("dpstats_python_missing", "dpstats_error", "error")))
    }
    .dp$ready <- TRUE
  }
  .dp$module
}

#' @rdname dp_python
#' @return \code{dp_python_available()}: \code{TRUE} when Python and dpstats can be used.
#' @export
dp_python_available <- function() {
  isTRUE(.dp$ready) || isTRUE(tryCatch(reticulate::py_module_available("dpstats"), error = function(e) FALSE))
}

dp_glue <- function() {
  dp_python()
  if (is.null(.dp$glue)) {
    .dp$glue <- reticulate::import_from_path("dpstats_r", path = .dp$glue_path, convert = TRUE)
  }
  .dp$glue
}

# Call a Python function; a Python exception becomes an R error of class
# c("dpstats_<exception type>", "dpstats_error", "error", "condition").
dp_call <- function(fun, ..., .call = sys.call(-1)) {
  tryCatch(
    fun(...),
    error = function(e) {
      if (inherits(e, "dpstats_error")) stop(e)
      info <- tryCatch(reticulate::py_last_error(), error = function(e2) NULL)
      type <- if (!is.null(info$type)) info$type else "Exception"
      msg <- if (!is.null(info$value)) info$value else conditionMessage(e)
      msg <- sub("\\s+$", "", msg)
      stop(dp_condition(msg, c(paste0("dpstats_", type), "dpstats_error", "error"), call = .call,
                        python_type = type))
    }
  )
}

# Raise the warnings a recorded Python call returned, as R warnings of class
# c("dpstats_<category>", "dpstats_warning", "warning", "condition");
# PrivacyLeakWarning also gets class "dpstats_privacy_leak".
dp_raise_warnings <- function(recorded, call = NULL) {
  for (w in recorded) {
    w <- unlist(w)
    cls <- c(paste0("dpstats_", w[[1]]), "dpstats_warning", "warning")
    if (identical(w[[1]], "PrivacyLeakWarning")) cls <- c("dpstats_privacy_leak", cls)
    warning(dp_condition(paste0(w[[1]], ": ", w[[2]]), cls, call = call))
  }
  invisible(NULL)
}
