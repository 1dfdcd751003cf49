# broom's generics, re-exported so that tidy(res) and glance(res) work after library(dpstats) alone (they are
# the same functions as broom's, so attaching broom too masks nothing).

#' @importFrom generics tidy
#' @export
generics::tidy

#' @importFrom generics glance
#' @export
generics::glance
