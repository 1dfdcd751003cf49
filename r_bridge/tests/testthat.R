library(testthat)
library(dpstats)

test_check("dpstats")
