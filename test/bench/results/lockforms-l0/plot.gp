set terminal pngcairo size 1500,900 font ',10'
set output 'throughput.png'
set multiplot layout 2,3 title 'libcompaction vs pgbench (same SQL) vs rejected designs: throughput by client threads'
set logscale x 2
set xtics (1,4,16)
set xrange [0.8:20]
set yrange [0:*]
set key top left font ',8'
set grid
set xlabel 'client threads'
set ylabel 'tx/s'
unset multiplot
