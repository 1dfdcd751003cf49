test_that("dp_corpus lists the public corpus", {
  skip_if_no_dpstats()
  corpus <- dp_corpus()
  expect_s3_class(corpus, "data.frame")
  expect_true(all(c("study", "instance", "task", "formula", "se") %in% names(corpus)))
  expect_true(all(corpus$task %in% c("sce", "linreg", "mean")))
  expect_true("mroz87_lwage" %in% corpus$instance)
  expect_true(dir.exists(attr(corpus, "root")))
  expect_error(dp_corpus(tempfile("nocorpus")), "corpus folder does not exist", class = "dpstats_error")
})

test_that("dp_instance and dp_baseline carry facts and the baseline Python computes", {
  skip_if_no_dpstats()
  inst <- dp_instance("mroz87_lwage")
  expect_s3_class(inst, "dp_instance")
  expect_identical(inst$facts$n, 428L)
  expect_identical(inst$facts$columns, c("Intercept", "educ", "exper", "expersq"))
  expect_identical(inst$facts$bounds$educ, c(0, 20))
  b <- dp_baseline("mroz87_lwage")
  expect_s3_class(b, "dp_baseline")
  dp <- reticulate::import("dpstats", convert = TRUE)
  pb <- dp$compute_baseline(dp$load_corpus()$instance("mroz87_lwage"))
  expect_identical(b$coef, pb$coef)
  expect_identical(b$se, pb$se)
  expect_equal(round(b$coef, 4), 0.1075)
  expect_output(print(inst), "mroz87_lwage")
  expect_output(print(b), "classical se")
  m <- dp_baseline("mean_mroz87_lwage")
  expect_identical(names(m$estimate), c("lwage", "educ", "exper", "hours", "age"))
  expect_error(dp_instance("no_such_instance"), "no instance", class = "dpstats_error")
})

test_that("a private coefficient on a corpus instance's data matches the corpus facts", {
  skip_if_no_dpstats()
  inst <- dp_instance("mroz87_lwage")
  data <- dp_instance_data("mroz87_lwage")
  res <- quiet_missing(dp_coef(inst$formula, data, coef = inst$coefficient, epsilon = 1,
                               bounds = inst$bounds))
  expect_identical(res$n, inst$facts$n)
  expect_identical(res$d, inst$facts$d)
})

test_that("dp_algorithms lists the registry with the defaults", {
  skip_if_no_dpstats()
  algos <- dp_algorithms()
  expect_true(all(c("task", "name", "interpretation", "citation") %in% names(algos)))
  defaults <- attr(algos, "defaults")
  expect_setequal(names(defaults), c("sce", "linreg", "mean"))
  for (task in names(defaults)) {
    row <- algos[algos$task == task & algos$name == defaults[[task]], ]
    expect_identical(nrow(row), 1L)
    expect_identical(row$interpretation, "standard")
  }
  expect_true(all(dp_algorithms("mean")$task == "mean"))
  expect_error(dp_algorithms("nope"), "unknown task", class = "dpstats_error")
})

test_that("dp_bench runs the benchmark through the CLI and dp_leaderboard reads its report", {
  skip_if_no_dpstats()
  skip_on_cran()
  results <- tempfile(fileext = ".sqlite")
  out <- dp_bench(results, instance = "mean_mroz87_lwage", algorithm = dp_algorithms("mean")$name[1],
                  epsilon = 1, trials = 2, workers = 1, report = file.path(tempdir(), "dp_report"))
  expect_true(file.exists(results))
  lb <- dp_leaderboard(attr(out, "leaderboard"))
  expect_true(all(c("task", "epsilon", "algorithm", "tau50") %in% names(lb)))
  expect_true(all(lb$task == "mean"))
  expect_error(dp_bench(results, instance = "mean_mroz87_lwage", algorithm = "no_such_algorithm", trials = 1),
               class = "dpstats_cli_error")
})
