module tiny

go 1.19
