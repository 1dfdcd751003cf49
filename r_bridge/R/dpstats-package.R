#' dpstats: differentially private statistics for economists
#'
#' An R interface to the Python package dpstats, through reticulate.
#'
#' \itemize{
#'   \item Private estimates from R formulas and data frames:
#'     \code{\link{dp_coef}}, \code{\link{dp_ols}}, \code{\link{dp_mean}}.
#'   \item The replication corpus: \code{\link{dp_corpus}},
#'     \code{\link{dp_instance}}, \code{\link{dp_baseline}},
#'     \code{\link{dp_instance_data}}, \code{\link{dp_dataset}}.
#'   \item The algorithms and the benchmark: \code{\link{dp_algorithms}},
#'     \code{\link{dp_bench}}, \code{\link{dp_report}},
#'     \code{\link{dp_leaderboard}}.
#' }
#'
#' Python is found by reticulate: set \code{RETICULATE_PYTHON} to a Python
#' that has dpstats (\code{pip install dpstats}) before the first call.
#' Python errors become R errors of class \code{dpstats_error}; Python
#' warnings become R warnings of class \code{dpstats_warning}.
#'
#' @keywords internal
#' @importFrom stats coef confint nobs vcov
#' @importFrom utils head tail read.csv
"_PACKAGE"
